"""MuJoCo scenes and Gymnasium environments with exact snapshot / restore."""

#: Camera image sides r3 renders, in pixels, least and most: each scene sizes MuJoCo's offscreen
#: framebuffer to the image, and GL drivers refuse buffers much larger than 4096.
IMAGE_SIDES = (16, 4096)
