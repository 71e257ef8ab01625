"""`peagle sweep`: the published P-EAGLE table for your own model and traffic, under a cost cap.

config.py (what to run), estimate.py (the plan: time and dollars against the budget), state.py (the
resumable state file), runner.py (deploy, verify, bench, tear down; budget, signals, resume),
report.py (the table, advice, chart). Everything AWS goes through lifecycle/ and bench/.
"""
