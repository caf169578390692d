"""grid_model.py OUT: writes the oracle's 4-layer llama-like grid model
(oracle._grid_model: uint8 tensors filled 0, 1, 2, ... with embed, per
layer w and n, norm and lm_head) to OUT/model.safetensors in the oracle's
order, with config.json's layer count (4, embeddings untied) and
OUT/plan.json, the rules that cut it: the model the grid view tests
(grid_views.sh, mpi_gridviews.sh) check tpload against."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npst  # noqa: E402
import oracle  # noqa: E402

RULES = [{"match": "*.w", "dim": 0},
         {"match": "*_head.weight", "dim": 0},
         {"match": "*embed*", "dim": 0}]


def main(out):
    os.makedirs(out)
    model = oracle._grid_model()
    npst.write(os.path.join(out, "model.safetensors"),
               {n: np.frombuffer(raw, np.uint8).reshape(shape)
                for n, _, shape, raw, _ in model},
               order=[m[0] for m in model])
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump({"num_hidden_layers": 4, "tie_word_embeddings": False}, f)
    with open(os.path.join(out, "plan.json"), "w") as f:
        json.dump({"rules": RULES}, f)


if __name__ == "__main__":
    main(sys.argv[1])
