/*
 * What a program sees of MPI_COMM_WORLD. Its launch rank is read through
 * PMPI_Comm_rank, below the shim, so the test can tell the two apart.
 *
 * One line per rank:
 *   rank R size N launch L sum S isum I scan P dup D half H/K cmp C tag_ub T gather G0,G1,...
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, size, launch, sum, isum, scan, one = 1, dup_rank, half_rank, half_size, cmp, flag;
    int *tag_ub, *gathered;
    MPI_Comm dup, half;
    MPI_Request req;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    PMPI_Comm_rank(MPI_COMM_WORLD, &launch);

    MPI_Allreduce(&launch, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Iallreduce(&rank, &isum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Scan(&one, &scan, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    gathered = malloc((size_t)size * sizeof(int));
    MPI_Allgather(&launch, 1, MPI_INT, gathered, 1, MPI_INT, MPI_COMM_WORLD);

    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_rank(dup, &dup_rank);
    MPI_Comm_compare(MPI_COMM_WORLD, dup, &cmp);
    MPI_Comm_get_attr(dup, MPI_TAG_UB, &tag_ub, &flag);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Comm_rank(half, &half_rank);
    MPI_Comm_size(half, &half_size);

    printf("rank %d size %d launch %d sum %d isum %d scan %d dup %d half %d/%d cmp %s tag_ub %d "
           "gather",
           rank, size, launch, sum, isum, scan, dup_rank, half_rank, half_size,
           cmp == MPI_CONGRUENT ? "congruent" : "other", flag && *tag_ub >= 32767);
    for (int k = 0; k < size; k++) printf("%c%d", k ? ',' : ' ', gathered[k]);
    printf("\n");
    fflush(stdout);

    free(gathered);
    MPI_Comm_free(&half);
    MPI_Comm_free(&dup);
    MPI_Finalize();
    return 0;
}
