"""What reading an untrusted file may cost, decided before any of it is read: the read budget of a dataset's layout
(:mod:`.cost`), the bounded, chunk-aligned blocks every dataset is read in (:mod:`.blocks`), the declared sizes of
.npz and .pt archives (:mod:`.archives`) and the walk of a file's groups with a depth limit (:mod:`.walk`)."""
