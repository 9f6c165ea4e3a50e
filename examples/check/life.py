# NumPy check for examples/life.remora: Game of Life on a 12 x 12 torus, a
# glider and a blinker, twelve generations (neighbour counts with np.roll).
import numpy as np

board = np.zeros((12, 12), dtype=bool)
for r, c in [(8, 9), (9, 10), (10, 8), (10, 9), (10, 10), (4, 3), (4, 4), (4, 5)]:
    board[r, c] = True

for _ in range(12):
    n = sum(np.roll(np.roll(board.astype(np.int64), dr, axis=0), dc, axis=1)
            for dr in (-1, 0, 1) for dc in (-1, 0, 1) if (dr, dc) != (0, 0))
    board = (n == 3) | (board & (n == 2))

print(" ".join(str(int(x)) for x in board.ravel()))
