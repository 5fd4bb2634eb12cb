"""Session 48: the append A/B and sweep logs (dev1.sh's ab.txt, sweep.txt) as one table of CUPTI
medians (us): a row a shape, a column a tree/round or pieces-a-CTA choice. Usage: summarize.py DIR."""
import re
import sys
from collections import defaultdict

table, columns = defaultdict(dict), []
for name in ("ab.txt", "sweep.txt"):
    label = None
    for line in open(f"{sys.argv[1]}/{name}"):
        head = re.match(r"^(?:== (\S+)|### pieces_per_cta (\S+))", line)
        if head:
            label = head.group(1) or f"ppc_{head.group(2)}"
            label = re.sub(r"^ab2_", "ab_", label)
            if label not in columns:
                columns.append(label)
            continue
        fields = line.split()
        if len(fields) > 8 and fields[0].startswith("append_") and " cutefi " in line:
            i = fields.index("cutefi")
            shape = " ".join([fields[0].replace("append_paged_", "")] + [f.split("=")[1] for f in fields[1:i - 1]])
            table[shape][label] = fields[i + 1]
print("shape".ljust(44) + "".join(c[:10].rjust(11) for c in columns))
for shape, row in table.items():
    print(shape.ljust(44) + "".join(row.get(c, "-").rjust(11) for c in columns))
