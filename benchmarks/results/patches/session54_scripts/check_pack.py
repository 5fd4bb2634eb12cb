"""Count the (spec, sm_90a) entries of the given prefixes missing from a pack."""
import sys
from cutefi.jit.aot import plan
from cutefi.jit.cache import ArtifactStore
from cutefi.jit.spec import toolchain_key
from cutefi.jit.registry import all_specs
pack, prefixes = sys.argv[1], sys.argv[2:]
specs = [s for s in all_specs() if any(s.name.startswith(p) for p in prefixes)]
jobs, _ = plan("9.0a", specs)
store = ArtifactStore(pack, writable=False)
missing = [s.name for s, t in jobs if store.read(s.lookup_key(t), toolchain_key(s.kind)) is None]
print(pack, prefixes, "jobs", len(jobs), "missing", len(missing), missing[:5])
