#!/usr/bin/env python3
"""Draws the training curves of an `rlx train-mnist` metrics log (CSV) with matplotlib.

    plot_training.py METRICS.csv OUT.png    # two panels: loss per step, accuracy per epoch
    plot_training.py --check                # exit 0 when matplotlib imports (train-mnist asks first)

The log has one row per step (kind=step: step, epoch as a fraction, loss, lr) and one per finished
epoch (kind=epoch: train loss and accuracy, test accuracy at the end of that epoch). A resumed run
appends to the log, so a step may appear twice; the last row of each step wins.
"""
import csv
import math
import sys


def read_log(path):
    steps, epochs = {}, {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["kind"] == "step":
                steps[int(row["step"])] = (float(row["epoch"]), float(row["loss"]))
            elif row["kind"] == "epoch":
                epochs[int(row["epoch"])] = (float(row["train_loss"]), float(row["train_acc"]),
                                             float(row["test_acc"]))
    return [steps[k] for k in sorted(steps)], [(e,) + epochs[e] for e in sorted(epochs)]


def smooth(ys, window):
    """Trailing mean over `window` points (the raw per-step loss is noisy)."""
    out, acc = [], 0.0
    for i, y in enumerate(ys):
        acc += y
        if i >= window:
            acc -= ys[i - window]
        out.append(acc / min(i + 1, window))
    return out


def plot(csv_path, png_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps, epochs = read_log(csv_path)
    if not steps:
        sys.exit(f"plot_training: {csv_path} has no step rows")
    fig, (ax_loss, ax_acc) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True, constrained_layout=True)
    x = [s[0] for s in steps]
    loss = [s[1] for s in steps]
    finite = [v if math.isfinite(v) else float("nan") for v in loss]
    ax_loss.plot(x, finite, color="#9ecae1", linewidth=0.8, label="loss per step")
    window = max(1, len(loss) // 50)
    if window > 1:
        ax_loss.plot(x, smooth(finite, window), color="#1f77b4", linewidth=1.8, label=f"mean of {window} steps")
    if epochs:
        ax_loss.plot([e[0] - 0.5 for e in epochs], [e[1] for e in epochs], "o", color="#08306b",
                     label="mean over the epoch")
    ax_loss.set_ylabel("training loss (cross-entropy)")
    ax_loss.set_title(f"rlx train-mnist: {len(steps)} steps, {len(epochs)} epochs")
    ax_loss.legend(loc="upper right")
    ax_loss.grid(alpha=0.3)
    if epochs:
        ex = [e[0] for e in epochs]
        ax_acc.plot(ex, [e[2] for e in epochs], "s-", color="#2ca02c", label="train accuracy")
        ax_acc.plot(ex, [e[3] for e in epochs], "o-", color="#d62728", label="test accuracy")
        for e, acc in zip(ex, [e[3] for e in epochs]):
            ax_acc.annotate(f"{acc:.3f}", (e, acc), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
        lo = min(min(e[2], e[3]) for e in epochs)
        ax_acc.set_ylim(max(0.0, lo - 0.05), 1.0)
        ax_acc.legend(loc="lower right")
    else:
        ax_acc.text(0.5, 0.5, "no finished epoch", transform=ax_acc.transAxes, ha="center")
    ax_acc.set_ylabel("accuracy")
    ax_acc.set_xlabel("epoch")
    ax_acc.grid(alpha=0.3)
    last = math.ceil(max(x))
    for ax in (ax_loss, ax_acc):  # epoch boundaries
        for e in range(1, last + 1):
            ax.axvline(e, color="gray", linewidth=0.6, linestyle=":")
    ax_acc.set_xlim(0, max(last, 1) + 0.08)
    ax_acc.set_xticks(range(0, max(last, 1) + 1))
    fig.savefig(png_path, dpi=110)


def main(argv):
    if argv[1:] == ["--check"]:
        import matplotlib  # noqa: F401
        return 0
    if len(argv) != 3:
        sys.exit(__doc__)
    plot(argv[1], argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
