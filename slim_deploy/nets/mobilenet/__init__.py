"""TF-Slim's MobileNet v2, v3 and EdgeTPU nets, built by one framework (`mobilenet`) from
the blocks of `conv_blocks`."""
