"""Wraps the rows bench/graphapi_bench.cpp wrote (one JSON object per line) into a bench/results file.
Usage: graphapi_results.py ROWS.jsonl OUT.json NAME "MACHINE" ["NOTE"]"""
import datetime
import json
import sys

rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
doc = {"benchmark": sys.argv[3], "machine": sys.argv[4], "date": datetime.date.today().isoformat(), "rows": rows}
if len(sys.argv) > 5:
    doc["note"] = sys.argv[5]
with open(sys.argv[2], "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")
print(f"{len(rows)} rows -> {sys.argv[2]}")
