"""Test doubles for peagle and for users' CI: a faithful SageMaker on moto, and JumpStart spec seeding."""

from .emulator import SageMakerEmulator
from .jumpstart_bucket import seed_jumpstart_bucket

__all__ = ["SageMakerEmulator", "seed_jumpstart_bucket"]
