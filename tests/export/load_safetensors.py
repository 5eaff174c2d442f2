"""Prints {name: {"dtype", "shape", "values"}} of every tensor in the safetensors files given, as
the `safetensors` package (safetensors.numpy.load_file) reads them: the export test compares it
with the state it saved."""
import json
import sys

from safetensors.numpy import load_file

out = {}
for path in sys.argv[1:]:
    for name, a in load_file(path).items():
        out[name] = {"dtype": str(a.dtype), "shape": list(a.shape),
                     "values": [float(x) for x in a.reshape(-1)]}
print(json.dumps(out, sort_keys=True))
