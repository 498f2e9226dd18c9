"""The (3, 4) float64 matrix that the gather/scatter tests (test_indexing_gather_scatter.py) and the
index-bounds tests (test_indexing_bounds_and_dtypes.py) index into.
"""

from __future__ import annotations

import numpy as np


MATRIX = np.arange(12, dtype=np.float64).reshape(3, 4)
