"""The contract tier: scenario functions run against the emulator in the fast suite and against a real account with
`pytest -m aws` (docs/ci.md, "The contract tier: what a real account answers")."""
