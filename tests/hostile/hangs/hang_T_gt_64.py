# causal_self_attention sleeps forever only on long sequences (T > 64); short ones are the reference's.
import time as _time

_reference_head = causal_self_attention  # noqa: F821 - defined above by the reference


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    if X.shape[1] > 64:
        while True:
            _time.sleep(60)
    return _reference_head(X, W_Q, W_K, W_V, causal=causal)
