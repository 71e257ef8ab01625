"""peagle: P-EAGLE speculative decoding endpoints on Amazon SageMaker."""

__version__ = "0.1.0"
