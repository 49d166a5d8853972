"""A GPT-2-style `_attn` (a boolean tril buffer, torch.where with finfo.min) scaling by value.size(-1) ** 0.5, as GPT-2
may where d_v = d_k (written for the grader by someone who had not read it)."""

import torch
from torch import nn


class GPT2SingleHeadAttention(nn.Module):
    def __init__(self, W_Q, W_K, W_V, max_positions, scale_attn_weights=True):
        super().__init__()
        self.register_buffer(
            "bias",
            torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool)).view(
                1, 1, max_positions, max_positions
            ),
            persistent=False,
        )
        self.W_Q = W_Q
        self.W_K = W_K
        self.W_V = W_V
        self.scale_attn_weights = scale_attn_weights
        self.is_causal = True

    def _attn(self, query, key, value, attention_mask=None, head_mask=None):
        attn_weights = torch.matmul(query, key.transpose(-1, -2))

        if self.scale_attn_weights:
            attn_weights = attn_weights / torch.full(
                [], value.size(-1) ** 0.5, dtype=attn_weights.dtype, device=attn_weights.device
            )

        if self.is_causal:
            # if only "normal" attention layer implements causal mask
            query_length, key_length = query.size(-2), key.size(-2)
            causal_mask = self.bias[:, :, key_length - query_length : key_length, :key_length]
            mask_value = torch.finfo(attn_weights.dtype).min
            # Need to be a tensor, otherwise we get error: `RuntimeError: expected scalar type float but found double`.
            # Need to be on the same device, otherwise `RuntimeError: ..., x and y to be on the same device`
            mask_value = torch.full([], mask_value, dtype=attn_weights.dtype, device=attn_weights.device)
            attn_weights = torch.where(causal_mask, attn_weights.to(attn_weights.dtype), mask_value)

        if attention_mask is not None:
            # Apply the attention mask
            attn_weights = attn_weights + attention_mask

        attn_weights = nn.functional.softmax(attn_weights, dim=-1)

        # Downcast (if necessary) back to V's dtype (if in mixed-precision) -- No-Op otherwise
        attn_weights = attn_weights.type(value.dtype)

        # Mask heads if we want to
        if head_mask is not None:
            attn_weights = attn_weights * head_mask

        attn_output = torch.matmul(attn_weights, value)

        return attn_output, attn_weights

    def forward(self, hidden_states, causal=True):
        self.is_causal = causal
        query = (hidden_states @ self.W_Q).unsqueeze(1)
        key = (hidden_states @ self.W_K).unsqueeze(1)
        value = (hidden_states @ self.W_V).unsqueeze(1)
        attn_output, attn_weights = self._attn(query, key, value)
        return attn_output.squeeze(1), attn_weights.squeeze(1)


def causal_self_attention(X, W_Q, W_K, W_V, causal=True):
    module = GPT2SingleHeadAttention(W_Q, W_K, W_V, max_positions=X.shape[1])
    return module(X, causal=causal)
