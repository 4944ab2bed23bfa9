"""The first listing of a fresh `serve` (a cold hash cache: every file opened and hashed), with
the Landlock wall and with `--no-confine`, alternated; the process's start is not timed.

Usage: python3 bench/confined_cold_listing.py [BIN] after building the release binary and a
tree at /tmp/cl (10,000 files of 2 KiB in 100 directories under /tmp/cl/wd/out, manifest
/tmp/cl/m.yaml exporting `out`)."""
import subprocess, json, time, urllib.request, sys
BIN = sys.argv[1] if len(sys.argv) > 1 else "target/release/resource-plane"
def one(flags):
    p=subprocess.Popen([BIN,"serve","--workdir","/tmp/cl/wd","--manifest","/tmp/cl/m.yaml","--trace","/tmp/cl/t.jsonl"]+flags,stdout=subprocess.PIPE,stderr=subprocess.DEVNULL)
    url=json.loads(p.stdout.readline())["url"]
    pid=p.pid
    def cpu():
        f=open(f"/proc/{pid}/stat").read().rsplit(")",1)[1].split()
        return int(f[11])+int(f[12])
    c0=cpu(); t0=time.perf_counter()
    body=urllib.request.urlopen(url+"/resources/files").read()
    wall=time.perf_counter()-t0; c1=cpu()
    p.terminate(); p.wait()
    return wall, c1-c0
res={"confined":[], "no-confine":[]}
for r in range(7):
    for name,flags in (("confined",[]),("no-confine",["--no-confine"])):
        res[name].append(one(flags))
import statistics as st
for k,v in res.items():
    print(k, "wall median %.1f ms"%(st.median(w for w,_ in v)*1000), "cpu median %d ticks"%st.median(c for _,c in v), [round(w*1000) for w,_ in v])
