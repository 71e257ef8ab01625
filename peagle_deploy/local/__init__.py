"""`peagle local`: the deployment plan's container environment on this machine (process or Docker)."""
