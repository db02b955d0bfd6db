/*
 * Not compiled: preprocessed (mpicc -E) by rankopt.adapters.shim.build to read the
 * MPI library, its version and the declarations of mpi.h in one pass.
 */
#include <mpi.h>
rankopt_mpi_standard MPI_VERSION MPI_SUBVERSION
#if defined(OPEN_MPI)
rankopt_mpi_library "Open MPI" OMPI_MAJOR_VERSION OMPI_MINOR_VERSION OMPI_RELEASE_VERSION
#elif defined(I_MPI_VERSION)
rankopt_mpi_library "Intel MPI" I_MPI_VERSION
#elif defined(MVAPICH2_VERSION)
rankopt_mpi_library "MVAPICH2" MVAPICH2_VERSION
#elif defined(MPICH_VERSION)
rankopt_mpi_library "MPICH" MPICH_VERSION
#else
rankopt_mpi_library "MPI"
#endif
