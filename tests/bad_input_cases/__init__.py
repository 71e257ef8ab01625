"""Case tables for tests/test_bad_inputs_table.py: one module per area, each with a CASES list."""
