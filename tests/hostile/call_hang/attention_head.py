"""One function hangs forever; another answers at once."""


def hang(X):
    while True:
        pass


def fast(X):
    return X * 2
