def check_vector_env(env): pass
