# causal_self_attention sleeps forever when T > 5; everything else is the reference's (issue 11).
import time as _time

_reference_head = causal_self_attention  # noqa: F821 - defined above by the reference


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    if X.shape[1] > 5:
        while True:
            _time.sleep(60)
    return _reference_head(X, W_Q, W_K, W_V, causal=causal)
