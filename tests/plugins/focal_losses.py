"""A user's plugin as docs/extending.md writes it: a focal loss (Lin et al. 2017) registered once,
with its parameter's default and range."""

import torch
import torch.nn.functional as F
from torch import nn

from astune.losses import ParamSpec, register_loss


@register_loss("focal", params=(ParamSpec("gamma", float, 2.0, 0.0),))
class FocalLoss(nn.Module):
    """``-(1 - p_t)^gamma log p_t`` per row; rows labelled ``ignore_index`` weigh nothing."""

    def __init__(self, gamma: float = 2.0, *, reduction: str = "mean", ignore_index: int = -100):
        super().__init__()
        self.gamma, self.reduction, self.ignore_index = gamma, reduction, ignore_index

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        flat, target = logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)
        keep = target != self.ignore_index
        # float32: log-probabilities of bf16 logits lose the small p_t the focal term weighs
        log_p = F.log_softmax(flat.float(), dim=-1).gather(1, target.clamp(min=0)[:, None])
        loss = -((1 - log_p.exp()) ** self.gamma * log_p).squeeze(1)
        loss = torch.where(keep, loss, 0.0)
        if self.reduction == "none":
            return loss.reshape(labels.shape)
        return loss.sum() if self.reduction == "sum" else loss.sum() / keep.sum().clamp(min=1)
