# The token data loader, a library of its own so that tests and the executor
# can both link it. Included by executor/CMakeLists.txt (and by
# tests/kernels.cmake when up_data does not exist yet).
add_library(up_data STATIC ${CMAKE_CURRENT_LIST_DIR}/data.c)
target_include_directories(up_data PUBLIC ${CMAKE_CURRENT_LIST_DIR})
