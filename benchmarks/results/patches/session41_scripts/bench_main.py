import sys
from cutefi.bench.cli import main
import cutefi
print("cutefi from", cutefi.__file__, file=sys.stderr)
sys.argv[0] = "cutefi-bench"
sys.exit(main())
