"""The ``sam2`` backend: SAM 2 masks from point and box prompts.

The model is built from the ``sam2`` package's own Hydra configs; ``checkpoint`` names its
weights. An empty checkpoint keeps the random initialisation, which only tests use: the masks are
then meaningless but every tensor takes its real path.

Prompting goes straight through the model's prompt encoder and mask decoder rather than through
``SAM2ImagePredictor``, because that class imports torchvision for three image transforms, and the
torchvision wheels on PyPI are CUDA builds that fail to load against the CPU torch this project
pins. The steps are the predictor's: resize to the model's square input, ImageNet normalisation,
backbone features with the no-memory embedding, prompts scaled to the input size, best of three
masks by predicted IoU, logits upsampled to the frame and thresholded at 0.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, fields

import numpy as np

from r3.perception.camera import RGBDFrame
from r3.perception.segmenters import Segment, Segmenter

log = logging.getLogger(__name__)

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
BOX_CORNER_LABELS = (2, 3)  # SAM's labels for a box's top-left and bottom-right corners


@dataclass
class Sam2Config:
    """``model_config``: a config inside the sam2 package; ``image_size``: the square input side
    (1024 for the released checkpoints; tests use less to keep the CPU embedding short)."""

    model_config: str = "configs/sam2.1/sam2.1_hiera_t.yaml"
    checkpoint: str = ""
    device: str = "cpu"
    image_size: int = 1024
    seed: int = 0

    @classmethod
    def from_options(cls, options: Mapping[str, object]) -> Sam2Config:
        """The config of a segmenter's options (the perception node's parameters): field ``f`` from
        ``sam2_f``, ``device`` shared with the other models; missing ones keep their defaults."""
        given = {f.name: options[f"sam2_{f.name}"] for f in fields(cls) if f"sam2_{f.name}" in options}
        return cls(**{**({"device": options["device"]} if "device" in options else {}), **given})

    def __post_init__(self):
        if self.image_size <= 0 or self.image_size % 32:
            raise ValueError(f"image_size must be a positive multiple of 32, got {self.image_size}")
        if not self.model_config.endswith(".yaml"):
            raise ValueError(f"model_config must name a sam2 YAML config, got {self.model_config!r}")


class Sam2Prompter:
    """SAM 2 image embedding once per frame, then any number of cheap prompts on it."""

    def __init__(self, config: Sam2Config):
        import torch
        from sam2.build_sam import build_sam2

        torch.manual_seed(config.seed)
        overrides = [] if config.image_size == 1024 else [f"++model.image_size={config.image_size}"]
        if not config.checkpoint:
            log.warning("SAM 2 without a checkpoint: random weights, masks are meaningless (tests only)")
        self.model = build_sam2(
            config.model_config,
            ckpt_path=config.checkpoint or None,
            device=config.device,
            hydra_overrides_extra=overrides,
        )
        self.size = config.image_size
        self.device = torch.device(config.device)
        self._mean = torch.tensor(IMAGENET_MEAN, device=self.device).view(1, 3, 1, 1)
        self._std = torch.tensor(IMAGENET_STD, device=self.device).view(1, 3, 1, 1)
        self._features: dict | None = None
        self._hw = (0, 0)

    def set_image(self, rgb: np.ndarray) -> None:
        import torch
        import torch.nn.functional as F

        with torch.inference_mode():
            img = (
                torch.from_numpy(np.ascontiguousarray(rgb)).to(self.device).permute(2, 0, 1)[None].float()
                / 255.0
            )
            img = F.interpolate(
                img, (self.size, self.size), mode="bilinear", align_corners=False, antialias=True
            )
            backbone = self.model.forward_image((img - self._mean) / self._std)
            _, feats, _, sizes = self.model._prepare_backbone_features(backbone)
            if self.model.directly_add_no_mem_embed:
                feats[-1] = feats[-1] + self.model.no_mem_embed
            maps = [f.permute(1, 2, 0).reshape(1, -1, *s) for f, s in zip(feats, sizes)]
        self._features = {"image": maps[-1], "high_res": maps[:-1]}
        self._hw = rgb.shape[:2]

    def predict(self, points: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, float]:
        """Prompt points (Nx2 pixel x, y) with SAM labels -> (HxW bool mask, predicted IoU)."""
        import torch
        import torch.nn.functional as F

        if self._features is None:
            raise RuntimeError("set_image() must come before predict()")
        h, w = self._hw
        # Pixel centres sit at +0.5 in the continuous coordinates SAM scales.
        scale = np.array([self.size / w, self.size / h])
        coords = torch.as_tensor(
            (np.asarray(points, dtype=np.float64) + 0.5) * scale, dtype=torch.float32, device=self.device
        )[None]
        lab = torch.as_tensor(labels, dtype=torch.int32, device=self.device)[None]
        with torch.inference_mode():
            sparse, dense = self.model.sam_prompt_encoder(points=(coords, lab), boxes=None, masks=None)
            low_res, iou, _, _ = self.model.sam_mask_decoder(
                image_embeddings=self._features["image"],
                image_pe=self.model.sam_prompt_encoder.get_dense_pe(),
                sparse_prompt_embeddings=sparse,
                dense_prompt_embeddings=dense,
                multimask_output=True,
                repeat_image=False,
                high_res_features=self._features["high_res"],
            )
            best = int(iou[0].argmax())
            logits = F.interpolate(low_res[:, best : best + 1], (h, w), mode="bilinear", align_corners=False)
        return (logits[0, 0] > 0).cpu().numpy(), float(iou[0, best].clamp(0, 1))


class Sam2Segmenter(Segmenter):
    """Point prompts for grounding, box prompts for following grounded objects between frames."""

    #: The config its :meth:`from_options` builds from a segmenter's options.
    config_class = Sam2Config

    @classmethod
    def from_options(cls, options: Mapping[str, object]) -> Sam2Segmenter:
        """The segmenter of the config that ``options`` (``make_segmenter``'s) give."""
        return cls(cls.config_class.from_options(options))

    def __init__(self, config: Sam2Config):
        self.config = config
        self.prompter = Sam2Prompter(config)

    def refuse_labels(self, labels: list[str]) -> str:
        return ""  # names are followed once a GroundPoint call has pointed at them

    def set_frame(self, frame: RGBDFrame) -> None:
        self.prompter.set_image(frame.rgb)

    def segment_point(self, col: int, row: int, label: str) -> Segment | None:
        mask, score = self.prompter.predict(np.array([[col, row]]), np.array([1]))
        return Segment(label, mask, score) if mask[row, col] else None

    def segment_box(self, box: tuple[int, int, int, int], label: str) -> Segment | None:
        x0, y0, x1, y1 = box
        mask, score = self.prompter.predict(np.array([[x0, y0], [x1, y1]]), np.array(BOX_CORNER_LABELS))
        return Segment(label, mask, score) if mask.any() else None
