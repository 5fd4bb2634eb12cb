"""Copy family: vectorised and TMA + cluster device-to-device copies."""

API = ("copy_", "tma_copy_")
