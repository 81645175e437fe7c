#!/usr/bin/env bash
# fetch-device-debs.sh — run HERE (Debian 12, network to the apt mirror):
# downloads the Debian packages that ultraplan builds against but a bare
# NVIDIA machine lacks (GLPK, cJSON, GSL, OpenBLAS, cmocka, OpenMPI, pkgconf),
# runtime and development halves plus the shared libraries they pull in,
# into .debs/ (in .gitignore: it travels only as the device call's carry). scripts/device-check.sh
# unpacks them with dpkg -x into a prefix on the device machine; nothing is
# installed system-wide there.
#
# Debian 12's glibc is 2.36, so these run on any newer host (Ubuntu 24.04's
# is 2.39). Packages a stock Ubuntu/Debian userland always has (libc6,
# libstdc++6, libgcc-s1, zlib1g, libgmp10, libudev1, libatomic1) are left out.
# The device call must name .debs in carry; the folder stays well under the
# 64 MiB the working tree may take.
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS=(
  # GLPK (the ILP) and what libglpk40 links
  libglpk40 libglpk-dev libamd2 libcolamd2 libsuitesparseconfig5 libltdl7
  # cJSON
  libcjson1 libcjson-dev
  # GSL (fit's least squares; CMake requires it)
  libgsl27 libgslcblas0 libgsl-dev
  # OpenBLAS, pthread flavour, and its Fortran runtime
  libopenblas0-pthread libopenblas-pthread-dev libgfortran5 libquadmath0
  # cmocka (unit tests)
  libcmocka0 libcmocka-dev
  # pkg-config (CMake's FindPkgConfig needs the program)
  pkgconf pkgconf-bin libpkgconf3
  # OpenMPI 4.1 and the libraries libopenmpi3 links
  libopenmpi3 libopenmpi-dev openmpi-bin openmpi-common
  libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libhwloc15 libibverbs1
  librdmacm1 libnl-3-200 libnl-route-3-200 libpmix2 libpsm-infinipath1 libpsm2-2
  libucx0 libnuma1 libmunge2
)
mkdir -p .debs
cd .debs
rm -f ./*.deb
apt-get download "${PKGS[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true
n=$(ls ./*.deb 2>/dev/null | wc -l)
if [ "$n" -ne "${#PKGS[@]}" ]; then
  echo "fetch-device-debs: got $n of ${#PKGS[@]} packages" >&2
  exit 1
fi
echo "fetch-device-debs: $n packages, $(du -sh . | cut -f1) in .debs/"
