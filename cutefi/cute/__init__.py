"""Device helpers shared by cutefi's CuTe DSL kernels (imported by kernels, never by API modules)."""
