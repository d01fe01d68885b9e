"""What the PyTorch measurement programs of validate/cuda share: writing their JSON."""
import json
import sys


def write_json(doc, output):
    """Writes `doc` as indented JSON to the file `output`, or to stdout when it is "-"."""
    text = json.dumps(doc, indent=1) + "\n"
    if output == "-":
        sys.stdout.write(text)
    else:
        with open(output, "w") as f:
            f.write(text)
