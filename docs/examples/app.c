/* A compiled MPI program that knows nothing of rankopt.
 * Build and run it reordered:
 *   mpicc -o app app.c
 *   rankopt run-mpi --network net.npz -- mpiexec -n 4 --oversubscribe ./app
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, size, total;
    const char *launched = getenv("OMPI_COMM_WORLD_RANK");
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Allreduce(&rank, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d (launched as %s): sum of ranks %d\n", rank, size,
           launched ? launched : "?", total);
    MPI_Finalize();
    return 0;
}
