#!/usr/bin/env python3
"""Validates sinter trace.json files against trace.schema.json (JSON Schema 2020-12).

Usage: check_trace.py TRACE.json [TRACE.json ...]
Exit codes: 0 valid, 1 invalid, 3 the `jsonschema` package is not installed.
"""
import json
import pathlib
import sys

try:
    import jsonschema
except ImportError:
    print("check_trace.py: the jsonschema package is not installed (pip install jsonschema)", file=sys.stderr)
    sys.exit(3)

schema = json.loads((pathlib.Path(__file__).parent / "trace.schema.json").read_text())
validator = jsonschema.Draft202012Validator(schema)
validator.check_schema(schema)
failed = False
for path in sys.argv[1:]:
    trace = json.loads(pathlib.Path(path).read_text())
    errors = sorted(validator.iter_errors(trace), key=lambda e: list(e.absolute_path))
    if errors:
        failed = True
        for e in errors[:20]:
            print(f"{path}: {'/'.join(map(str, e.absolute_path))}: {e.message}")
        print(f"{path}: {len(errors)} schema error(s)")
    else:
        print(f"{path}: valid ({len(trace['traceEvents'])} events)")
sys.exit(1 if failed else 0)
