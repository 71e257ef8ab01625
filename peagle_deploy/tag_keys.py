"""The two tag keys every peagle resource is known by; a module of its own so that the models that build requests
(autoscale) can tag them without importing `tags`, which reads those models."""

PREFIX = "peagle:"
MANAGED = "peagle:managed"
