#pragma once
// The normalised Walsh-Hadamard matrix H of size n (n a power of two): H[i][j] = (-1)^popcount(i &
// j) / sqrt(n). It is symmetric and orthogonal (H H^T = I), so it is its own inverse.
#include <cstdint>
#include <vector>

namespace oscar {

bool is_power_of_two(int64_t n);
std::vector<double> hadamard_matrix(int64_t n);  // row-major n x n

// Bit reversal of `index` over `bits` bits (the order OSCAR's P_br places eigen-directions in).
int64_t bit_reverse(int64_t index, int bits);

// perm[j] for OSCAR's P_br = I[:, perm], given the eigenvalues in U's column order: perm[br(i)] =
// order[i], order = eigenvalue indices by decreasing eigenvalue (ties by index).
std::vector<int64_t> bit_reversal_permutation(const std::vector<double>& eigenvalues);

}  // namespace oscar
