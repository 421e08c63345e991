"""The bar above the diagram: the kernel bandwidth (a log-scale slider and a box), the kernel, the bins and the
reliability-bars toggle; it drives Session.bandwidth and asks for the bandwidth-dependent metrics on release."""

from __future__ import annotations

import math

from PySide6 import QtCore, QtWidgets

from calibview.gui.session import Session

H_MIN, H_MAX, SLIDER_STEPS = 0.005, 0.5, 1000


def slider_to_bandwidth(value: int) -> float:
    """Logarithmic slider: 0 -> 0.005, 1000 -> 0.5."""
    return H_MIN * (H_MAX / H_MIN) ** (value / SLIDER_STEPS)


def bandwidth_to_slider(h: float) -> int:
    """The slider position (0..1000) of bandwidth ``h``, clipped to [H_MIN, H_MAX]; slider_to_bandwidth's
    inverse."""
    h = min(max(h, H_MIN), H_MAX)
    return int(round(SLIDER_STEPS * math.log(h / H_MIN) / math.log(H_MAX / H_MIN)))


class BandwidthBar(QtWidgets.QWidget):
    """Slider (log scale) + numeric box + kernel + bins + reliability-bars toggle, above the canvas; it drives
    Session.bandwidth and listens to no Session signal."""

    def __init__(self, session: Session, parent=None) -> None:
        super().__init__(parent)
        self.session = session
        self.slider = QtWidgets.QSlider(QtCore.Qt.Horizontal)
        self.slider.setRange(0, SLIDER_STEPS)
        self.slider.setToolTip("Kernel bandwidth (log scale). Ctrl+[ and Ctrl+] step it.")
        self.slider.setMinimumWidth(120)    # a slider, never a square, on a laptop
        self.box = QtWidgets.QDoubleSpinBox()
        self.box.setDecimals(4)
        self.box.setRange(H_MIN, H_MAX)
        self.box.setSingleStep(0.005)
        self.kernel = QtWidgets.QComboBox()
        self.kernel.addItem("Gaussian", "gaussian")
        self.kernel.addItem("Epanechnikov", "epanechnikov")
        self.bins = QtWidgets.QSpinBox()
        self.bins.setRange(2, 100)
        self.bins.setSpecialValueText("auto")
        self.bins.setMinimum(1)             # 1 shows as "auto"
        self.bins.setToolTip("Equal-width bins of ECE, MCE, class-wise ECE and the reliability bars "
                             "(auto: 10 / 15 / 20 by N)")
        self.show_bins = QtWidgets.QCheckBox("Reliability bars")
        layout = QtWidgets.QHBoxLayout(self)
        layout.setContentsMargins(6, 2, 6, 2)
        layout.addWidget(QtWidgets.QLabel("Bandwidth"))
        layout.addWidget(self.slider, 1)
        layout.addWidget(self.box)
        layout.addWidget(self.kernel)
        layout.addSpacing(12)
        layout.addWidget(QtWidgets.QLabel("Bins"))
        layout.addWidget(self.bins)
        layout.addWidget(self.show_bins)
        self._updating = False
        self.slider.valueChanged.connect(self._on_slider_value_changed)
        self.slider.sliderReleased.connect(self._on_settle_timeout)
        self.box.valueChanged.connect(self._on_box_value_changed)
        self.box.editingFinished.connect(self._on_settle_timeout)
        self.kernel.currentIndexChanged.connect(self._on_kernel_changed)
        self.bins.editingFinished.connect(self._on_bins_changed)
        # The metrics that depend on the bandwidth (CAL and the sharpness gap; TOT is the Brier score) are
        # refreshed when the user lets go: at once on release, Enter, Ctrl+[ / Ctrl+] and a kernel switch (the
        # engine recomputes only those), after a short pause for keys held on the slider.
        self.settle = QtCore.QTimer(self)
        self.settle.setSingleShot(True)
        self.settle.setInterval(250)
        self.settle.timeout.connect(self._on_settle_timeout)
        self.sync()

    def sync(self) -> None:
        """Show the session's bandwidth, kernel and bins without emitting anything back."""
        self._updating = True
        self.slider.setValue(bandwidth_to_slider(self.session.bandwidth))
        self.box.setValue(self.session.bandwidth)
        self.kernel.setCurrentIndex(max(0, self.kernel.findData(self.session.kernel)))
        self.bins.setValue(1 if self.session.bins == "auto" else int(self.session.bins))
        self._updating = False

    def step(self, factor: float) -> None:
        """Multiply the bandwidth by ``factor`` (within the range) and refresh the metrics that depend on it."""
        self.set_bandwidth(min(max(self.session.bandwidth * factor, H_MIN), H_MAX))
        self._on_settle_timeout()

    def set_bandwidth(self, h: float) -> None:
        """Set the session's bandwidth (the curves follow at once) and show it."""
        self.session.set_bandwidth(h)
        self.sync()

    def _on_slider_value_changed(self, value: int) -> None:
        if self._updating:
            return
        self.session.set_bandwidth(slider_to_bandwidth(value))
        self._updating = True
        self.box.setValue(self.session.bandwidth)
        self._updating = False
        if not self.slider.isSliderDown():
            self._on_settled()

    def _on_box_value_changed(self, value: float) -> None:
        if self._updating:
            return
        self.session.set_bandwidth(value)
        self._updating = True
        self.slider.setValue(bandwidth_to_slider(value))
        self._updating = False

    def _on_kernel_changed(self, _index: int) -> None:
        if self._updating:
            return
        self.session.set_bandwidth(self.session.bandwidth, self.kernel.currentData())
        self._on_settle_timeout()

    def _on_bins_changed(self) -> None:
        value = "auto" if self.bins.value() == 1 else self.bins.value()
        if value != self.session.bins:
            self.session.set_bins(value)
            self.session.evaluate()

    def _on_settled(self) -> None:
        self.settle.start()

    def _on_settle_timeout(self) -> None:
        self.settle.stop()
        ev = self.session.evaluation          # None while a regression run is shown (its bar is its own)
        if ev is not None and (ev.request.bandwidth, ev.request.kernel) != (self.session.bandwidth,
                                                                             self.session.kernel):
            self.session.evaluate()
