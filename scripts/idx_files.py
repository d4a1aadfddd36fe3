"""Reading IDX files (MNIST's and Fashion-MNIST's format, gzipped) into numpy arrays: shared by the
scripts that read Fashion-MNIST directly (fashion_mnist_torch.py, onnx_fashion_mnist.py)."""
import gzip

import numpy as np


def read_idx(path):
    """The array of a gzipped IDX file of unsigned bytes: its dimensions from the header."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)
