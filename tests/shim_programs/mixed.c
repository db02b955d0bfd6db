/* A small mixed workload: allreduce at two sizes and an alltoall.
 *
 * usage: mixed A_BYTES A_COUNT B_BYTES B_COUNT C_BYTES C_COUNT
 *   A, B: allreduce vectors (float); C: each rank's alltoall send buffer.
 * Also one MPI_Bcast of 4 bytes, one MPI_Iallreduce of 8 bytes and a barrier.
 * Rank 0 prints `total_s T` (the timed calls, after one warm-up round
 * outside the timing) and `phase_s NAME T` per phase.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static double phase(MPI_Comm comm, int which, long nbytes, long count, float *a, float *b)
{
    int p;
    MPI_Comm_size(comm, &p);
    long n = nbytes / (long)sizeof(float);
    MPI_Barrier(comm);
    double t0 = MPI_Wtime();
    for (long i = 0; i < count; i++) {
        if (which == 2)
            MPI_Alltoall(a, (int)(n / p), MPI_FLOAT, b, (int)(n / p), MPI_FLOAT, comm);
        else
            MPI_Allreduce(a, b, (int)n, MPI_FLOAT, MPI_SUM, comm);
    }
    double t = MPI_Wtime() - t0, tmax;
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, comm);
    return tmax;
}

int main(int argc, char **argv)
{
    long bytes[3], counts[3], most = 0;
    int rank, x = 1;
    double y[2] = {1, 2}, z[2];
    MPI_Request req;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (argc != 7) {
        if (rank == 0) fprintf(stderr, "usage: mixed A_BYTES A_COUNT B_BYTES B_COUNT C_BYTES C_COUNT\n");
        MPI_Finalize();
        return 2;
    }
    for (int i = 0; i < 3; i++) {
        bytes[i] = atol(argv[1 + 2 * i]);
        counts[i] = atol(argv[2 + 2 * i]);
        if (bytes[i] > most) most = bytes[i];
    }
    float *a = calloc((size_t)most / sizeof(float) + 1, sizeof(float));
    float *b = calloc((size_t)most / sizeof(float) + 1, sizeof(float));
    MPI_Bcast(&x, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Iallreduce(y, z, 2, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    double total = 0;
    const char *names[3] = {"allreduce_a", "allreduce_b", "alltoall"};
    for (int i = 0; i < 3; i++) phase(MPI_COMM_WORLD, i, bytes[i], counts[i] ? 1 : 0, a, b);
    for (int i = 0; i < 3; i++) {
        double t = phase(MPI_COMM_WORLD, i, bytes[i], counts[i], a, b);
        total += t;
        if (rank == 0) printf("phase_s %s %.6f\n", names[i], t);
    }
    if (rank == 0) printf("total_s %.6f\n", total);
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
