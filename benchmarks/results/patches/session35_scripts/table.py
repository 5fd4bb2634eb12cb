import json,sys,statistics
rows=[json.loads(l) for l in open(sys.argv[1])]
tags=[]
for r in rows:
    if r['tag'] not in tags: tags.append(r['tag'])
shapes=list(rows[0]['res'])
print(f"{'shape':16s}"+"".join(f"{t:>30s}" for t in tags)+"   new/base")
for s in shapes:
    line=f"{s:16s}"; med={}
    for t in tags:
        v=[r['res'][s] for r in rows if r['tag']==t]
        med[t]=statistics.median(x[0] for x in v)
        line+="  "+" ".join(f"{x[0]:6.1f}" for x in v)+f" cub{statistics.median(x[1] for x in v):6.1f} r{statistics.median(x[2] for x in v):.3f}"
    print(line+f"  {med[tags[0]]/med[tags[-1]]:.3f}")
