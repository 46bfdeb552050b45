"""Where the warps of one ncu-profiled kernel stall, per SASS instruction: reads the CSV of
``ncu --import REP --page source --csv --print-source sass`` (SourceCounters section collected) and prints the top
instructions by warp-stall samples (with their top three reasons), then the samples by opcode.

    python3 bench/ncu_sass_stalls.py FILE.csv [TOP]
"""
import csv,sys,collections
f=sys.argv[1]
rows=list(csv.reader(open(f)))
hdr=rows[1]; data=rows[2:]
ix={h:i for i,h in enumerate(hdr)}
stalls=[h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
tot=sum(int(r[ix['Warp Stall Sampling (All Samples)']] or 0) for r in data)
print("total samples",tot, "instructions", len(data))
# per-instruction top
def num(r,h):
    try: return int(r[ix[h]])
    except: return 0
top=sorted(data,key=lambda r:-num(r,'Warp Stall Sampling (All Samples)'))[:int(sys.argv[2]) if len(sys.argv)>2 else 25]
for r in top:
    s=num(r,'Warp Stall Sampling (All Samples)')
    br=sorted(((num(r,h),h[6:]) for h in stalls),reverse=True)[:3]
    print(f"{100*s/tot:5.1f}% {r[ix['Address']][-5:]} {r[ix['Source']].strip()[:60]:60s} exec={num(r,'Instructions Executed'):>8} "+" ".join(f"{h}={100*v/tot:.1f}" for v,h in br if v))
# by opcode class
agg=collections.Counter(); aggs=collections.defaultdict(collections.Counter)
for r in data:
    op=r[ix['Source']].strip().split()
    if not op: continue
    o=op[0]
    if o.startswith('@'): o=op[1]
    o=o.split('.')[0]
    s=num(r,'Warp Stall Sampling (All Samples)')
    agg[o]+=s
print("by opcode:", ", ".join(f"{o} {100*v/tot:.1f}%" for o,v in agg.most_common(14)))
