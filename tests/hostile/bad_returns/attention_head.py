"""Returns things that are not plain tensors."""

import pickle

import torch


class Liar(torch.Tensor):
    """Claims to equal anything (research/sandbox.md section 1)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


def returns_list(X):
    return [X, X]


def returns_none(X):
    return None


def returns_subclass(X):
    return {"r0": X.as_subclass(Liar)}


def returns_pickle(X):
    return pickle.dumps(X)


def returns_int32(X):
    return {"r0": X.to(torch.int32)}
