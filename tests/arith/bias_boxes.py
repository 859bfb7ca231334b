"""Synthetic gemms with a bias (a layer's F.linear), fp32 products rounded, one fp32 accumulator
per output started at +0.0: `after` adds the bias to the result (cuBLAS's epilogue), `inside`
starts the accumulator at the bias."""
import numpy as np


def _products(A, B):
    A, B = np.asarray(A, np.float32), np.asarray(B, np.float32)
    return [np.outer(A[:, k], B[k]).astype(np.float32) for k in range(A.shape[1])], B.shape[1]


def _bias(bias, ncols):
    return np.zeros(ncols, np.float32) if bias is None else np.asarray(bias, np.float32)


def after(A, B, bias=None):
    products, ncols = _products(A, B)
    acc = np.zeros(products[0].shape, np.float32)
    for p in products:
        acc = (acc + p).astype(np.float32)
    return (acc + _bias(bias, ncols)).astype(np.float32)


def inside(A, B, bias=None):
    products, ncols = _products(A, B)
    acc = np.broadcast_to(_bias(bias, ncols), products[0].shape).astype(np.float32)
    for p in products:
        acc = (acc + p).astype(np.float32)
    return acc
