/*
 * Point-to-point between specific MPI_COMM_WORLD ranks. Every message
 * carries the sender's launch rank (read through PMPI_Comm_rank, below the
 * shim), so the test can check who was really paired with whom.
 *
 * One line per rank:
 *   rank R launch L from_prev A from_next B last C source S
 * A: launch rank of the message from rank R-1 (MPI_Sendrecv ring),
 * B: launch rank of the message from rank R+1 (MPI_Isend / MPI_Irecv ring),
 * C: on the last rank, launch rank of the message MPI_Send'ed by rank 0 and
 *    received with MPI_ANY_SOURCE, and S its status.MPI_SOURCE (else -1 -1).
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, launch, prev, next, from_prev, from_next, last = -1, source = -1;
    MPI_Request reqs[2];
    MPI_Status status;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    PMPI_Comm_rank(MPI_COMM_WORLD, &launch);
    prev = (rank + size - 1) % size;
    next = (rank + 1) % size;

    MPI_Sendrecv(&launch, 1, MPI_INT, next, 1, &from_prev, 1, MPI_INT, prev, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    MPI_Irecv(&from_next, 1, MPI_INT, next, 2, MPI_COMM_WORLD, &reqs[0]);
    MPI_Isend(&launch, 1, MPI_INT, prev, 2, MPI_COMM_WORLD, &reqs[1]);
    MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);

    if (rank == 0) MPI_Send(&launch, 1, MPI_INT, size - 1, 3, MPI_COMM_WORLD);
    if (rank == size - 1) {
        MPI_Recv(&last, 1, MPI_INT, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &status);
        source = status.MPI_SOURCE;
    }
    MPI_Barrier(MPI_COMM_WORLD);

    printf("rank %d launch %d from_prev %d from_next %d last %d source %d\n", rank, launch,
           from_prev, from_next, last, source);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
