"""Fill family: raw bit-pattern fills (NVRTC-built), and NaN poisoning for tests."""

API = ("fill_", "poison_")
