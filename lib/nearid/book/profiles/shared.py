"""Limits several chapters' parameters share."""

from nearid.book.params import Options

MNIST_TRAIN, MNIST_TEST = 60_000, 10_000  # images in MNIST's training and test sets
POWER_OF_TWO = Options(tuple(2 ** k for k in range(3, 11)))  # image sides the conv models take
