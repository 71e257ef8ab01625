"""The two tag keys every peagle resource is known by; a module of its own so that the models that build requests
(autoscale) can tag them without importing `tags`, which reads those models."""

PREFIX = "peagle:"
MANAGED = "peagle:managed"
SWEEP_ID = "peagle:sweep-id"  # the `peagle sweep` that created a resource
LEASE = "peagle:lease"  # who works on a resource now, until when (lifecycle/lease.py)
