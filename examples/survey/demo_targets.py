import os
import numpy as np

def blocked_sum(x):
    """A sum whose block size comes from the environment, as a library's tuning would."""
    x = np.asarray(x)
    b = int(os.environ.get("DEMO_BLOCK", "4"))
    parts = [x[i:i + b].sum() for i in range(0, len(x), b)]
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total
