# Every contract function sleeps forever (the module imports fine).
import time as _time


def _forever(*args, **kwargs):
    while True:
        _time.sleep(60)


causal_self_attention = gaussian_positional_weights = gaussian_positional_qk = _forever
score_scale_statistics = streaming_attention = cached_attention_step = _forever


class KVCache:
    def __init__(self, *args, **kwargs):
        _forever()
