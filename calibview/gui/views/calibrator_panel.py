"""The calibrator panel: which calibrators to fit, the Fit button, and show/hide per fitted calibrator."""

from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets

from calibview.core import calibrators as calib
from calibview.core.errors import CalibviewError
from calibview.core.evaluation.toplabel.absent import DISABLED_REASON, USABLE_CALIBRATORS
from calibview.core.io.toplabel.format import is_toplabel
from calibview.gui.model.document import is_regression
from calibview.gui.session import Session
from calibview.plot.theme import calibrator_color

#: Display order in the panel; methods registered later (the calibrator family) appear as they land.
PREFERRED_ORDER = ("ts", "ts-grid", "vs", "ms", "dirichlet", "hb", "ir", "platt", "beta", "mrr")


def panel_methods() -> list[str]:
    """The registered calibrators the panel offers (not "none"), in PREFERRED_ORDER, others after by name."""
    names = [n for n in calib.available() if n != "none"]
    return sorted(names, key=lambda n: (PREFERRED_ORDER.index(n) if n in PREFERRED_ORDER else 99, n))


class CalibratorPanel(QtWidgets.QWidget):
    """Ticks the calibrators of the next fit and lists fitted ones with a show/hide box; listens to
    selection_changed, evaluation_changed, visible_changed and busy_changed."""

    def __init__(self, session: Session, parent=None) -> None:
        super().__init__(parent)
        self.session = session
        self.boxes: dict[str, QtWidgets.QCheckBox] = {}
        choose = QtWidgets.QGroupBox("Fit on the fit split")
        grid = QtWidgets.QVBoxLayout(choose)
        self.option_widgets: dict[str, dict[str, QtWidgets.QWidget]] = {}
        for name in panel_methods():
            m = calib.get(name)
            box = QtWidgets.QCheckBox(f"{m.label} ({name})")
            box.setChecked(name in session.calibrators)
            box.setToolTip(_tooltip(m))
            self.boxes[name] = box
            grid.addWidget(box)
            widgets = _option_widgets(name)
            if widgets:
                self.option_widgets[name] = widgets
                row = QtWidgets.QHBoxLayout()
                row.setContentsMargins(24, 0, 0, 0)
                for label, w in widgets.items():
                    row.addWidget(QtWidgets.QLabel(label))
                    row.addWidget(w)
                row.addStretch(1)
                grid.addLayout(row)
        options = QtWidgets.QFormLayout()
        self.n_boot = QtWidgets.QSpinBox()
        self.n_boot.setRange(0, 10000)
        self.n_boot.setSingleStep(100)
        self.n_boot.setValue(session.n_boot)
        self.n_boot.setToolTip("Bootstrap resamples for every interval (0: no intervals); a long bootstrap asks first")
        options.addRow("Bootstrap resamples", self.n_boot)
        grid.addLayout(options)
        self.fit_button = QtWidgets.QPushButton("Fit && evaluate")
        self.fit_button.setToolTip("Fit the ticked calibrators and evaluate them (Ctrl+R)")
        self.fit_button.clicked.connect(self.fit)
        grid.addWidget(self.fit_button)

        shown = QtWidgets.QGroupBox("Shown")
        self.list = QtWidgets.QListWidget()
        self.list.itemChanged.connect(self._on_list_item_changed)
        QtWidgets.QVBoxLayout(shown).addWidget(self.list)

        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(choose)
        layout.addWidget(shown, 1)
        self._updating = False
        session.selection_changed.connect(self._on_session_selection_changed)
        session.evaluation_changed.connect(self._on_session_evaluation_changed)
        session.visible_changed.connect(self._on_session_visible_changed)
        session.busy_changed.connect(self._on_session_busy_changed)

    def checked(self) -> list[str]:
        """The ticked calibrators that this run can fit (enabled boxes only), in panel order."""
        return [n for n, b in self.boxes.items() if b.isChecked() and b.isEnabled()]

    def options(self) -> dict[str, dict]:
        """Constructor options of the ticked calibrators, from their option widgets (defaults omitted).

        Raises CalibviewError naming the calibrator and the field when a field does not hold a valid value."""
        out = {}
        checked = set(self.checked())
        for name, widgets in self.option_widgets.items():
            opts = {}
            for label, w in widgets.items():
                key = w.property("option")
                try:
                    value = _widget_value(w)
                except ValueError:
                    if name not in checked:          # a half-typed field of an unticked calibrator is no error
                        continue
                    raise CalibviewError(
                        f"The {label or key} of {calib.get(name).label} ({name}) must be a number or 'auto', "
                        f"not {w.text().strip()!r}; correct it and fit again.") from None
                if value != w.property("default"):
                    opts[key] = value
            if opts:
                out[name] = opts
        return out

    def fit(self) -> None:
        """Fit and evaluate the ticked calibrators with their options and resamples; a bad option is an error_occurred
        and nothing starts."""
        try:
            options = self.options()
        except CalibviewError as e:                  # refused, not quietly replaced by the default
            self.session.error_occurred.emit("Invalid calibrator option", str(e))
            return
        self.session.set_calibrators(self.checked())
        self.session.options = tuple((n, tuple(o.items())) for n, o in options.items()
                                     if n in self.session.calibrators)
        self.session.n_boot = self.n_boot.value()
        if self.confirm_cost():
            self.session.evaluate()

    def confirm_cost(self) -> bool:
        """Ask before a bootstrap estimated above a minute (calibview.core.evaluation.cost); True to go on."""
        from calibview.core.evaluation import cost

        req, run = self.session.build_request(), self.session.run
        if req is None or run is None or not req.n_boot or is_regression(run):
            return True
        est = cost.bootstrap_cost(run.split(req.eval_split).n, run.k, req.n_boot, len(req.calibrators))
        if est.seconds <= cost.ANNOUNCE_S:
            return True
        answer = QtWidgets.QMessageBox.question(
            self, "A long bootstrap",
            f"{req.n_boot:,} resamples of {run.split(req.eval_split).n:,} samples for {len(req.calibrators)} "
            f"calibrators will take {est.describe()} (estimated). Evaluate anyway? "
            "Fewer resamples give a quicker answer.")
        return answer == QtWidgets.QMessageBox.StandardButton.Yes

    def _on_session_selection_changed(self) -> None:
        run = self.session.run
        if is_regression(run):              # its recalibrators are fixed by its form (calibview.gui.regression_mode)
            for box in self.boxes.values():
                box.setEnabled(False)
            return
        can_fit = run is not None and self.session.fit_split is not None
        self.fit_button.setEnabled(can_fit)
        self.fit_button.setToolTip("Fit the ticked calibrators and evaluate them (Ctrl+R)" if can_fit else
                                   "Nothing to fit on: pick a fit split (this run may have a single split)")
        top = run is not None and is_toplabel(run)
        for name, box in self.boxes.items():
            m = calib.get(name)
            usable = name in USABLE_CALIBRATORS if top else (not m.binary_only or run is None or run.k == 2)
            box.setEnabled(run is not None and usable and self.session.fit_split is not None)
            if top and not usable:
                box.setToolTip(f"{m.label} cannot run on a top-label run: {DISABLED_REASON}.")
            elif top and m.binary_only:
                box.setToolTip(f"{m.label} on the confidence, as the binary problem 'is the prediction correct'.")
            elif run is not None and m.binary_only and run.k != 2:
                box.setToolTip(f"{m.label} is for binary problems; this run has K = {run.k}.")

    def _on_session_evaluation_changed(self, evaluation) -> None:
        self._updating = True
        self.list.clear()
        if evaluation is not None:
            for i, r in enumerate(evaluation.results):
                item = QtWidgets.QListWidgetItem(r.label if r.name != "none" else "Uncalibrated (none)")
                item.setData(QtCore.Qt.UserRole, r.name)
                item.setFlags(item.flags() | QtCore.Qt.ItemIsUserCheckable)
                item.setCheckState(QtCore.Qt.Checked if r.name in self.session.visible else QtCore.Qt.Unchecked)
                pix = QtGui.QPixmap(14, 14)
                pix.fill(QtGui.QColor(calibrator_color(r.name, i)))
                item.setIcon(QtGui.QIcon(pix))
                tips = [r.fitted.label]
                if r.argmax_changed:
                    tips.append(f"moves the arg-max of {100 * r.argmax_changed:.1f}% of samples")
                tips += [f"⚠ {w}" for w in r.warnings]
                item.setToolTip("\n".join(tips))
                if r.warnings:
                    item.setText(item.text() + "  ⚠")
                self.list.addItem(item)
        self._updating = False

    def _on_session_visible_changed(self, visible) -> None:
        self._updating = True
        for i in range(self.list.count()):
            item = self.list.item(i)
            want = QtCore.Qt.Checked if item.data(QtCore.Qt.UserRole) in visible else QtCore.Qt.Unchecked
            if item.checkState() != want:
                item.setCheckState(want)
        self._updating = False

    def _on_list_item_changed(self, _item) -> None:
        if self._updating:
            return
        names = [self.list.item(i).data(QtCore.Qt.UserRole) for i in range(self.list.count())
                 if self.list.item(i).checkState() == QtCore.Qt.Checked]
        self.session.set_visible(names)

    def _on_session_busy_changed(self, busy: bool) -> None:
        self.fit_button.setText("Fitting…" if busy else "Fit && evaluate")
        # still enabled while busy: a new fit supersedes the running evaluation


def _option_widgets(name: str) -> dict[str, QtWidgets.QWidget]:
    """The options a person tunes most, as small widgets tagged with the constructor keyword they set."""
    def tag(w, option, default, tip):
        w.setProperty("option", option)
        w.setProperty("default", default)
        w.setToolTip(tip)
        return w
    if name == "hb":
        bins = QtWidgets.QSpinBox()
        bins.setRange(2, 200)
        bins.setValue(15)
        strategy = QtWidgets.QComboBox()
        strategy.addItems(["uniform", "quantile"])
        return {"bins": tag(bins, "bins", 15, "Bins per class"),
                "": tag(strategy, "strategy", "uniform", "Equal-width (uniform) or equal-mass (quantile) bins")}
    if name in ("ms", "dirichlet"):
        penalty = QtWidgets.QComboBox()
        penalty.addItems(["odir", "l2"])
        lam = QtWidgets.QLineEdit("auto")
        lam.setMaximumWidth(70)
        return {"penalty": tag(penalty, "penalty", "odir", "ODIR: off-diagonal and bias penalty (Kull et al.); "
                                                            "L2: distance from the identity"),
                "λ": tag(lam, "lam", "auto", "Penalty strength; 'auto' picks it on a held-out fifth of the fit "
                                             "split")}
    return {}


def _widget_value(w):
    if isinstance(w, QtWidgets.QSpinBox):
        return w.value()
    if isinstance(w, QtWidgets.QComboBox):
        return w.currentText()
    text = w.text().strip()
    if text.lower() in ("", "auto"):
        return "auto"
    return float(text)            # ValueError when not a number: the panel refuses the fit and says so


def _tooltip(method) -> str:
    doc = (type(method).__doc__ or "").strip().splitlines()
    first = doc[0] if doc else method.label
    argmax = "keeps the arg-max" if method.keeps_argmax else "may change the arg-max"
    return f"{first}\n{argmax}"
