"""Zeroes its inputs in place."""


def mutate(X):
    X.mul_(0)
    return X
