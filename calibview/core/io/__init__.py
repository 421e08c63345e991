"""Reading and writing model outputs: the HDF5 format (discovery, validation, read, write), shards, streaming
from disk, importers of .npz / .npy / .pt, metadata columns, the guard against hostile files, safe writes, the demo.

Nothing here knows of calibrators or metrics. Import the modules themselves (``from calibview.core.io import
logits``); this package imports nothing at import time."""
