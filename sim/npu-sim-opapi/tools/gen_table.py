"""Transcribes the aclnn operator prototypes of the published op_api headers of hicann/ops-math
and hicann/ops-nn into the simulator's operator table, one operator per line.

    python3 tools/gen_table.py OPS_MATH_GIT_DIR OPS_NN_GIT_DIR > ops.tsv

Each argument is a clone (or bare git directory) of that repository; its HEAD is read. Only
prototypes are taken: the operator name, its first-phase parameter list, the directory of the
header (whose name, in CamelCase, is the op type of the operator's kernel), and the engine
(aicpu when the op directory only has an op_kernel_aicpu, cube under matmul/ and conv/)."""
import re, subprocess, sys, collections
if len(sys.argv) != 3:
    sys.exit(__doc__)
repos = [("hicann/ops-math", sys.argv[1]), ("hicann/ops-nn", sys.argv[2])]
ops = collections.OrderedDict()
skipped = []
heads = []
def camel(d): return "".join(p[:1].upper() + p[1:] for p in d.split("_"))
for name, d in repos:
    commit = subprocess.check_output(["git","-C",d,"rev-parse","HEAD"]).decode().strip()
    heads.append(f"{name}@{commit[:12]}")
    files = subprocess.check_output(["git","-C",d,"ls-tree","-r","HEAD","--name-only"]).decode().split("\n")
    dirs = set()
    for f in files:
        parts = f.split("/")
        for i in range(1, len(parts)):
            dirs.add("/".join(parts[:i]))
    hdrs = [f for f in files if re.search(r'/op_api/aclnn_[a-z0-9_]+\.h$', f)]
    for f in sorted(hdrs):
        m = re.match(r'(.*?)/(?:op_host/)?op_api/', f)
        opdir = m.group(1)
        if "/" not in opdir: continue
        kernel_op = camel(opdir.split("/")[-1])
        if f"{opdir}/op_kernel" not in dirs and f"{opdir}/op_kernel_aicpu" in dirs: engine = "aicpu"
        elif opdir.split("/")[0] in ("matmul", "conv", "gemm") or opdir.startswith("experimental/matmul"): engine = "cube"
        else: engine = "vector"
        txt = subprocess.check_output(["git","-C",d,"show","HEAD:"+f]).decode(errors="replace")
        txt = re.sub(r'/\*.*?\*/', ' ', txt, flags=re.S)
        txt = re.sub(r'//[^\n]*', ' ', txt)
        txt = re.sub(r'^\s*#[^\n]*', ' ', txt, flags=re.M)
        phase2 = set(m.group(1) for m in re.finditer(r'aclnnStatus\s+(aclnn\w+)\s*\(\s*void\s*\*\s*\w+\s*,\s*(?:const\s+)?uint64_t\s+\w+\s*,\s*aclOpExecutor\s*\*\s*\w+\s*,\s*(?:const\s+)?aclrtStream\s+\w+\s*\)', txt))
        for m in re.finditer(r'aclnnStatus\s+(aclnn\w+?)GetWorkspaceSize\s*\(([^;{]*?)\)\s*;', txt, flags=re.S):
            api = m.group(1)
            op = api[5:]
            if op in ops: continue
            params = [" ".join(p.split()) for p in m.group(2).split(",")]
            parsed = []
            for p in params:
                pm = re.match(r'^(.*?[\s\*&])(\w+)$', p)
                if not pm: parsed = None; break
                ctype = re.sub(r'\s*\*\s*', '*', pm.group(1).strip()).replace("**", "**")
                ctype = re.sub(r'\s+', ' ', ctype)
                parsed.append((ctype, pm.group(2)))
            if parsed is None or len(parsed) < 2 or parsed[-2][0] != "uint64_t*" or parsed[-1][0] != "aclOpExecutor**":
                skipped.append((op, "irregular parameters", params)); continue
            if api not in phase2:
                skipped.append((op, "no phase-2 prototype", None)); continue
            ops[op] = (name.split("/")[1], kernel_op, engine, f"{name}:{f}", parsed[:-2])
out = sys.stdout
out.write("# aclnn operators of libopapi.so, transcribed from the op_api headers of " + " and ".join(heads) + "\n")
out.write("# by sim/npu-sim-opapi/tools/gen_table.py. Columns (tab-separated): operator (aclnn<Op>), group,\n")
out.write("# kernel op type (the op directory in CamelCase), engine (vector | cube | aicpu), header,\n")
out.write("# parameters of aclnn<Op>GetWorkspaceSize before workspaceSize and executor ('type name' joined by ';').\n")
for op, (grp, kop, eng, src, ps) in ops.items():
    out.write("\t".join([op, grp, kop, eng, src, ";".join(f"{t} {n}" for t, n in ps)]) + "\n")
print(len(ops), "ops;", len(skipped), "skipped", file=sys.stderr)
for s in skipped: print("skipped", s, file=sys.stderr)
